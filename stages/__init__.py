"""One thin click entry point per DVC stage: read inputs, call bench, write outputs."""
