"""Helpers for tests that need real servers (a Kafka broker, ...)."""
