"""The API surfaces. Each module has: NAME, matches(path), looks_like(obj),
rewrite_body(data, ctx) -> bytes | None, and StreamRewriter(ctx)."""
