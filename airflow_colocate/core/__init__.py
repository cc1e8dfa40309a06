"""Pure helpers every layer may import: errors, names, SQL types, paths, time."""
