"""ELF reading: headers, PT_LOAD, notes, bulk symbol tables, demangling."""
