package dev.idmint.client;

/**
 * IdmintRequestException: a server refused the request itself (400, 401,
 * 403, an unknown key), or asked for something this client cannot give
 * (a numeric ID of a key that issues text, a range of a key without
 * ranges). Retrying does not help; {@link #code()} and {@link #field()}
 * say what was wrong.
 */
public final class IdmintRequestException extends IdmintException {
    private static final long serialVersionUID = 1L;

    IdmintRequestException(String key, String endpoint, int status, String code, String field, String message) {
        super(key, endpoint, status, code, field, false, message, null);
    }
}
