"""The headless engine. It never imports textual: everything an operator can do is a method here."""
