"""View 5, History: the journal's records and the record pane."""
