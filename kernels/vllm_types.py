"""Minimal stand-ins for the vLLM types that ``spec_decode_utils`` names (filled in by issue 4)."""

from dataclasses import dataclass


@dataclass
class CommonAttentionMetadata:
    """Placeholder."""


@dataclass
class VllmConfig:
    """Placeholder."""
