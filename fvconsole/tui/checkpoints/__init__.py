"""View 1, Checkpoints: the listing, its rows and wording, the marks and the prune."""
