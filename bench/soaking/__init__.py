"""The parts of ``bench/soak.py``: its database reads, its Django side, workers, freezes."""
