"""The console's own widgets, by what each is: tables, inputs, statics, progress and bars,
how a table cell is fitted, and the one module that uses Textual's private API."""
