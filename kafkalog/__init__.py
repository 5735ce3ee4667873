"""kafkalog: Apache Kafka's on-disk partition logs, read and written byte for byte as Kafka does."""

__version__ = "0.1.0"
