"""Backend storage: path layout (``layout``), a URI file-system seam (``fs``) and the shared
checksummed copy primitive (``copy``)."""
