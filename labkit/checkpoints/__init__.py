"""Checkpoints: labkit's safe file format and atomic writes, on the ground floor.

What flows, experiments and data_parallel save goes through here: a zip of
JSON structure, ``.npy`` arrays and a ``torch.save`` dict of tensors, read
back without running code the file names (:mod:`.format`); classes come back
only from an allow-list (:mod:`.allowed`); files are written atomically, a
temp file beside the target and then a rename (:mod:`.files`); a
:class:`~.location.CheckpointLocation` (a folder or any fsspec URL) is where
the process that runs the work writes them, handing back a reference.

Packages declare their own classes loadable with :func:`allow_library`
(``labkit.flows`` declares its nodes and flows), so this package needs none
of them.

Imports: the standard library, numpy, fsspec (in :mod:`.location`), torch (only where a value is a torch
one, and only once the caller has loaded torch), and ``labkit.errors``;
never ``labkit.flows``, ``labkit.nodes``, ``labkit.experiments``,
``labkit.data_parallel``, ``labkit.scheduling`` or ``labkit.views``.
"""

from .allowed import Allowed, UnsavableError, allow_in_checkpoints, allow_library, library_modules
from .decoder import Decoder
from .encoder import Encoder
from .files import STALE_AFTER_S, atomic_dump, check_writable, make_temp, remove_stale_temps
from .format import FORMATS, load_checkpoint, read_snapshot, write_snapshot, writer
from .location import Checkpointable, CheckpointLocation, CheckpointRef

__all__ = [
    "write_snapshot",
    "read_snapshot",
    "load_checkpoint",
    "writer",
    "atomic_dump",
    "check_writable",
    "make_temp",
    "remove_stale_temps",
    "allow_in_checkpoints",
    "allow_library",
    "library_modules",
    "Allowed",
    "Encoder",
    "Decoder",
    "UnsavableError",
    "FORMATS",
    "STALE_AFTER_S",
    "CheckpointLocation",
    "CheckpointRef",
    "Checkpointable",
]
