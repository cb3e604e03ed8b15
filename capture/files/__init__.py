"""latscope.capture.files."""
