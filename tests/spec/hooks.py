"""What worker/openapi.yaml cannot say, checked instead of skipped (loaded
by scripts/spec.sh through SCHEMATHESIS_HOOKS), and what a 503 must carry.

Some refusals of a request that JSON Schema calls valid compare a field with
another, with the state, with the caller, or count bytes rather than
characters: no schema can state them. For the routes that have such refusals,
tests/spec/schemathesis.toml turns the stock positive_data_acceptance off and
the check below stands in for it: the same statuses pass (2xx, 3xx, 401, 403,
404, 409, 429, 5xx), and a refusal outside them passes only if it is one of
the route's own below, by code and the field its message names."""

import schemathesis

TAIL = {
    # A request ID belongs to an API key: the root token schemathesis calls
    # with has none of its own. And it is at most 128 bytes of UTF-8 (as its
    # tag's store checks it, the release before this one's included), which
    # 128 characters may pass.
    ("request_id_needs_key", ""),
    ("invalid_request_id", "requestId:"),
}
OWN_REFUSALS = {
    "PUT /v1/tags/{tag}": {
        # maxId only grows (skipping IDs is safe, reissuing is not) and stays
        # within an opaque tag's domain: the tag as it is, or the request's
        # own `opaque`.
        ("out_of_range", "max_id:"),
        # maxStep is at least the step: the request's, else the tag's.
        ("out_of_range", "max_step:"),
        # At most 256 bytes of UTF-8 (read back by the store, the release
        # before this one's included), which 256 characters may pass.
        ("out_of_range", "description length:"),
    },
    "POST /v1/segment/{tag}/lease": TAIL,
    "POST /v1/segment/{tag}/lease/return": TAIL
    | {
        # start <= end, within 1..=2^63 - 1: one field against another.
        ("invalid_segment", "segment:"),
    },
}


def accepted(status):
    return 200 <= status < 400 or status in (401, 403, 404, 409, 429) or status >= 500


@schemathesis.check
def positive_data_acceptance_but_what_no_schema_says(ctx, response, case):
    """positive_data_acceptance, for the routes of OWN_REFUSALS."""
    own = OWN_REFUSALS.get(case.operation.label)
    meta = case.meta
    if own is None or meta is None or not meta.generation.mode.is_positive:
        return None
    if accepted(response.status_code):
        return None
    try:
        error = response.json().get("error", {})
    except ValueError:
        error = {}
    code, message = error.get("code", ""), error.get("message", "")
    if response.status_code == 400 and any(code == c and message.startswith(m) for c, m in own):
        return None
    raise AssertionError(f"Schema-valid request rejected: {response.status_code} {error}")


@schemathesis.check
def unavailable_says_when(ctx, response, case):
    """A 503 (which tests/spec/schemathesis.toml lets not_a_server_error
    pass: storage slower than the request's budget on a loaded machine)
    carries Retry-After, in whole seconds."""
    if response.status_code != 503:
        return None
    retry = response.headers.get("retry-after")
    value = retry[0] if isinstance(retry, list) and retry else retry
    if not (isinstance(value, str) and value.isdigit() and int(value) >= 1):
        raise AssertionError(f"503 without Retry-After in seconds: {retry!r}")
    return None
