"""Live preview: the host-routed HTTP/WebSocket reverse proxy and its upstream connections."""
