"""Settings: the pydantic model of `oncall.yaml`, its loader, and `config show` rendering."""

from oncall.settings.loader import FlagValue, LoadedSettings, load_settings
from oncall.settings.model import Settings

__all__ = ["FlagValue", "LoadedSettings", "Settings", "load_settings"]
