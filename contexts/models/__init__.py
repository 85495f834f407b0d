"""The core data model: fragments with immutable versions, their sources (documents, and the
git repositories followed), pins, links, embeddings, nudges and the audit log. See
``docs/data-model.md``."""

from contexts.models.audit import AuditEvent
from contexts.models.bundles import Context, ContextOwner, ContextSubscription
from contexts.models.changes import Change, ChangeHead, ChangeKind, Follower
from contexts.models.dedup import DedupCandidate, DedupState, StalenessScan
from contexts.models.embeddings import Embedding, EmbeddingGeneration, VectorCache
from contexts.models.evaluation import EvalRun
from contexts.models.fragments import (
    EvidenceState,
    Fragment,
    FragmentContext,
    FragmentKind,
    FragmentSourceState,
    FragmentStatus,
    FragmentVersion,
    Link,
    Namespace,
    Pin,
)
from contexts.models.governance import Nudge, NudgeKind
from contexts.models.jobs import IngestionJob, JobState
from contexts.models.proposals import (
    Proposal,
    ProposalKind,
    ProposalState,
    ProposalTarget,
)
from contexts.models.secrets import SecretAction, SecretFinding, SecretOrigin
from contexts.models.sources import (
    FragmentOrigin,
    SourceDocument,
    SourcePointer,
    document_origin,
    written_origin,
)
from contexts.models.sources_git import Source, SourceKind, SourceState
from contexts.models.traces import RetrievalTrace
from contexts.models.uploads import UploadBlob

__all__ = [
    "AuditEvent",
    "EvidenceState",
    "Change",
    "ChangeHead",
    "ChangeKind",
    "Context",
    "ContextOwner",
    "ContextSubscription",
    "DedupCandidate",
    "DedupState",
    "Embedding",
    "EmbeddingGeneration",
    "EvalRun",
    "Fragment",
    "FragmentContext",
    "FragmentKind",
    "FragmentSourceState",
    "FragmentStatus",
    "Follower",
    "FragmentVersion",
    "IngestionJob",
    "JobState",
    "Link",
    "Namespace",
    "Nudge",
    "NudgeKind",
    "Pin",
    "Proposal",
    "ProposalKind",
    "ProposalState",
    "ProposalTarget",
    "RetrievalTrace",
    "SecretAction",
    "SecretFinding",
    "SecretOrigin",
    "Source",
    "SourceDocument",
    "FragmentOrigin",
    "document_origin",
    "written_origin",
    "SourceKind",
    "SourceState",
    "SourcePointer",
    "StalenessScan",
    "UploadBlob",
    "VectorCache",
]
