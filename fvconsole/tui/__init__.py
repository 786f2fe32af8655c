"""The Textual console. Thin: it renders core plans and runs them in thread workers."""
