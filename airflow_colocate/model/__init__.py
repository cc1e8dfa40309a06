"""The domain floor: the frozen views the catalog hands out, the reasons a join falls back, and the
pure rules that the catalog, the planner, the jobs, the page and the CLI all ask, so each rule is
said once. Imports the standard library and ``core`` only: the Spark driver loads it freely."""
