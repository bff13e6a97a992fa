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

# the world (simulation, config, task families) -- added by the world engineer
from world.config import DIFFICULTIES, FAMILIES, WorldConfig  # noqa: E402
from world.sim import Event, Op, Outcome, World  # noqa: E402

__all__ += ["World", "WorldConfig", "Op", "Event", "Outcome", "FAMILIES", "DIFFICULTIES"]

# persistence and rolling summaries -- added by the lifecycle engineer (issue 3)
from world.persistence import StoreFileError, load_store, save_store  # noqa: E402
from world.summary import ExtractiveSummarizer, RollingSummary, Summarizer  # noqa: E402

__all__ += ["StoreFileError", "save_store", "load_store", "Summarizer", "ExtractiveSummarizer", "RollingSummary"]
