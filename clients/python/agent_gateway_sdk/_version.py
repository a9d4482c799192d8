"""The SDK's version: the version of the gateway API it speaks (``info.version`` of the
gateway's OpenAPI document), so a client and a gateway of one version agree on every field."""

__version__ = "0.1.0"
API_VERSION = __version__
