"""What every view shows, without Textual: the fold of events into console state (:mod:`.state`), the fleet's rows
(:mod:`.fleet`), the jobs table (:mod:`.jobs`), one presentation of each event (:mod:`.present`), which events an
operator sees (:mod:`.story`) and small formatting helpers (:mod:`.format`). The console (console.tui), the headless
log and ``logs`` (console.headless), ``jobs`` and the fleet are built on it; an import-linter contract keeps Textual
and the TUI out."""
