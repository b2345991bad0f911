"""Model access: specs, personas, requests and completions, providers, prices."""

from eigenjury.models.errors import ProviderError
from eigenjury.models.factory import make_provider
from eigenjury.models.prices import Price, PriceTable
from eigenjury.models.spec import ModelSpec, Persona, SpecError
from eigenjury.models.types import ChatRequest, Completion, Message, Provider, Usage

__all__ = [
    "ChatRequest",
    "Completion",
    "Message",
    "ModelSpec",
    "Persona",
    "Price",
    "PriceTable",
    "Provider",
    "ProviderError",
    "SpecError",
    "Usage",
    "make_provider",
]
