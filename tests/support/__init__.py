"""What several test modules share: builders of upstream responses and readers of what the client
got, per surface. Test modules import from here, never from one another."""

from thinkwire import engine


def drive(surface, ctx, data: bytes, pieces: list[bytes] | None = None):
    """A stream through the surface's stream callable, read in `pieces` (default: one read),
    then the end of stream: (the bytes the client got, the driver)."""
    driver = engine.stream_driver(surface, ctx)
    call = driver.callable()   # what mitmproxy calls (the C callable in front, where built)
    out: list[bytes] = []
    for c in (pieces if pieces is not None else [data]):
        out += call(c)
    out += call(b"")
    assert all(out), "never an empty chunk"
    return b"".join(out), driver
