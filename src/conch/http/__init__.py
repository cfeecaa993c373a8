"""The HTTP front end (docs/spec.md §8): Streamable HTTP MCP, legacy SSE, the invoke API, health,
manifest and the dashboard."""

# the invoke API's answer to "is this result an error?" (read by `conch invoke`)
IS_ERROR_HEADER = "X-Conch-Is-Error"
