package dev.idmint.client;

import java.time.Instant;
import java.util.Map;

/**
 * Decoded is an ID's parts as the server's decode route gives them
 * ({@code /v1/decode/{id}}; {@code idmint decode --json} prints the same).
 *
 * @param id the ID
 * @param layout the layout it was read with
 * @param time when it was made (null for IDs without a time)
 * @param unixMs the same in milliseconds since 1970 (0 without a time)
 * @param node the layout's worker field, or its only node field
 * @param sequence the sequence field
 * @param extra other node fields, by name; the raw answer's other members too
 */
public record Decoded(String id, String layout, Instant time, long unixMs, long node, long sequence, Map<String, Object> extra) {
}
