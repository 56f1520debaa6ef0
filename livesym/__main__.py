from livesym.entry import main

raise SystemExit(main())
