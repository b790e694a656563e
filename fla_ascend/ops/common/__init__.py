"""Chunk stages shared by the chunked ops: gate cumsum, WY representation (kkt + solve +
w/u), inter-chunk state recurrence ``h`` and output ``o``; one file per stage."""
