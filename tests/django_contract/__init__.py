"""Django's own Tasks-framework contract, checked against LaterBackend."""
