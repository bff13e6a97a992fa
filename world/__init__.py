"""memgym world: the step-clocked world and its memory store (no gymnasium imports here)."""

from world.actr import ActRRecord
from world.cues import extract_cues
from world.embedding import CachedEmbedder, HashingEmbedder, SentenceTransformerEmbedder, make_embedder
from world.importance import ImportanceScorer, Scorer
from world.memory import (
    EpisodicMemory,
    ErasureReport,
    MemoryStore,
    NamespaceView,
    RelationType,
    SemanticMemory,
    WriteReport,
)

__all__ = [
    "ActRRecord",
    "extract_cues",
    "CachedEmbedder",
    "HashingEmbedder",
    "SentenceTransformerEmbedder",
    "make_embedder",
    "ImportanceScorer",
    "Scorer",
    "EpisodicMemory",
    "ErasureReport",
    "MemoryStore",
    "NamespaceView",
    "RelationType",
    "SemanticMemory",
    "WriteReport",
]
