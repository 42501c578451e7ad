"""What worker/openapi.yaml cannot say, checked instead of skipped (loaded
by scripts/spec.sh through SCHEMATHESIS_HOOKS)."""

import schemathesis

PUT_TAG = "PUT /v1/tags/{tag}"


@schemathesis.check
def put_tag_refuses_only_by_state(ctx, response, case):
    """PUT /v1/tags/{tag}'s positive_data_acceptance (tests/spec/schemathesis.toml
    turns the stock check off for this route alone): a request of the schema
    is accepted, except the refusals that compare one field with another or
    with the tag as it is, which JSON Schema cannot: maxId may only grow, and
    stays within an opaque tag's domain (a lower one, or one past the domain,
    is 400 out_of_range naming max_id); maxStep is at least the step (the
    request's, else the tag's: 400 out_of_range naming max_step). Any other
    400 is a schema-valid request refused."""
    meta = case.meta
    if case.operation.label != PUT_TAG or meta is None or not meta.generation.mode.is_positive:
        return None
    if response.status_code != 400:
        return None
    error = response.json().get("error", {})
    if error.get("code") == "out_of_range" and error.get("message", "").startswith(("max_id:", "max_step:")):
        return None
    raise AssertionError(f"Schema-valid request rejected: 400 {error}")
