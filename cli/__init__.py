"""The ``kafkalog`` command line (installed as ``kafkalog_cli``): a thin click app over the library."""
