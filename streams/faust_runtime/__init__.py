"""faust-streaming as the stream job's runtime (``runonce worker --runtime faust``)."""
