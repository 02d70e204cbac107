package dev.idmint.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.io.FileInputStream;
import java.io.InputStream;
import java.nio.file.Path;
import java.security.KeyStore;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManagerFactory;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** TLS with the JDK's own machinery: a self-signed certificate made by keytool for 127.0.0.1. */
class TlsTest {
    @TempDir
    Path dir;

    @Test
    void httpsWithTheCallersTrustAndRefusedWithout() throws Exception {
        File ks = dir.resolve("node.p12").toFile();
        String keytool = System.getProperty("java.home") + File.separator + "bin" + File.separator + "keytool";
        Process p = new ProcessBuilder(keytool, "-genkeypair", "-alias", "node", "-keyalg", "EC", "-dname", "CN=idmint test",
                "-ext", "SAN=ip:127.0.0.1", "-validity", "2", "-storetype", "PKCS12", "-keystore", ks.getPath(),
                "-storepass", "changeit", "-keypass", "changeit").redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes());
        assertTrue(p.waitFor(60, TimeUnit.SECONDS) && p.exitValue() == 0, "keytool: " + out);

        KeyStore store = KeyStore.getInstance("PKCS12");
        try (InputStream in = new FileInputStream(ks)) {
            store.load(in, "changeit".toCharArray());
        }
        KeyManagerFactory kmf = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
        kmf.init(store, "changeit".toCharArray());
        SSLContext server = SSLContext.getInstance("TLS");
        server.init(kmf.getKeyManagers(), null, null);
        TrustManagerFactory tmf = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
        tmf.init(store);
        SSLContext trusting = SSLContext.getInstance("TLS");
        trusting.init(null, tmf.getTrustManagers(), null);

        FakeNode.Cluster cl = new FakeNode.Cluster().key("order", "segment");
        try (FakeNode n = new FakeNode("tls", cl, server)) {
            assertTrue(n.url().startsWith("https://"));
            try (IdmintClient c = IdmintClient.builder(n.url()).sslContext(trusting).token("t").build()) {
                long a = c.next("order"), b = c.next("order");
                assertTrue(b > a);
                assertEquals("Bearer t", n.lastAuth.get("order"));
            }
            // The JDK's default trust store does not know the certificate:
            // the handshake fails, and the call says so within its timeout.
            try (IdmintClient c = IdmintClient.builder(n.url()).timeout(Duration.ofSeconds(3)).build()) {
                IdmintUnavailableException x = assertThrows(IdmintUnavailableException.class, () -> c.next("order"));
                assertTrue(x.getMessage().contains("SSL") || x.getMessage().contains("certification") || x.getMessage().contains("PKIX"), x.getMessage());
            }
        }
    }
}
