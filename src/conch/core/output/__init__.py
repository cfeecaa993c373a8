"""Pure, I/O-free normalization of raw job output into the text a model is shown."""
