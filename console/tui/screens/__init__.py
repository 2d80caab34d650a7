"""The console's screens: the main layout and the modals (confirm, rewind, restart approval, help)."""
