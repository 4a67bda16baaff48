"""Kestrel from Python: the `kestrel` command line and the `kestrel serve` API.

    from kestrel import Kestrel, Client
    k = Kestrel(home="~/.kestrel")
    run = k.train(data="shapes/data.yaml", model="n", epochs=10, imgsz=128)
    boxes = k.predict("photos/", model=run["weights"]["best"])

Standard library only. docs/python.md in the Kestrel repository.
"""

from ._cli import Box, ImageResult, Kestrel, Predictions
from ._client import Client, Event
from ._errors import ApiError, CommandError, KestrelError

__version__ = "0.1.0"

__all__ = ["Kestrel", "Client", "Event", "Box", "ImageResult", "Predictions",
           "KestrelError", "CommandError", "ApiError", "__version__"]
