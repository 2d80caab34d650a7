"""The console's panes: one module per concern."""
