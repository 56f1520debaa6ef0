from livesym.cli import main

raise SystemExit(main())
