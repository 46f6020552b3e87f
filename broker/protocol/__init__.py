"""Records and the codes they carry: the vocabulary shared by the log, the engine and the exporters."""
