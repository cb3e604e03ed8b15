"""latscope.capture.sim."""
