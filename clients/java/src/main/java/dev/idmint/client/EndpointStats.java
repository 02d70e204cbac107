package dev.idmint.client;

/**
 * EndpointStats is one endpoint's health.
 *
 * @param url the endpoint
 * @param node the node name its answers give, or null
 * @param up whether its breaker is closed
 * @param requests requests sent to it
 * @param failures its retryable failures
 */
public record EndpointStats(String url, String node, boolean up, long requests, long failures) {
}
