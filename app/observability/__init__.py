"""What the gateway tells its operators: structured logs and Prometheus metrics."""
