"""Acceptance payload run on each host under torchrun; depends only on torch and the stdlib."""

import re
import warnings

# A torch without numpy says so at its import, in every process that imports it: "UserWarning: Failed to
# initialize NumPy: No module named 'numpy' (Triggered internally at ...tensor_numpy.cpp...)". The payload
# never needs numpy (sdc.py hashes and gathers without it), so on a host without numpy, this machine's venv
# among them, that line was noise at the top of every launcher.log and report excerpt. This one message is
# ignored, set here before any torch import (`-m pav_payload`, `-m pav_payload.torchrun`); a numpy that is
# there and fails to load ("_ARRAY_API not found", a numpy 1.x/2.x mismatch) and every other warning show.
NUMPY_MISSING = "Failed to initialize NumPy: No module named 'numpy'"
warnings.filterwarnings("ignore", message=re.escape(NUMPY_MISSING), category=UserWarning)
