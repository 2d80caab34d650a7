"""The Textual operator console: widgets render engine events and call engine commands; no agent logic."""
