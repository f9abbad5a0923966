import io.debezium.embedded.Connect;
import io.debezium.engine.DebeziumEngine;
import io.debezium.engine.RecordChangeEvent;
import io.debezium.engine.format.ChangeEventFormat;

import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.connect.header.Header;
import org.apache.kafka.connect.source.SourceRecord;
import org.apache.kafka.connect.storage.Converter;
import org.apache.kafka.connect.storage.HeaderConverter;

/**
 * A Debezium pipeline into Kafka for pgcdc-kafka's takeover test
 * (tests/debezium_takeover/): the PostgreSQL connector in the embedded
 * engine, its records converted as a Kafka Connect worker converts them
 * (header, key and value converters) and produced to Kafka with the Java
 * client's default partitioner, as Debezium Server's Kafka sink does: a
 * batch is marked processed only once Kafka acknowledged all of it, so the
 * engine stores (with {@code offset.storage}, e.g. Connect's
 * KafkaOffsetBackingStore) only offsets of records Kafka has.
 *
 * <p>Usage: {@code DebeziumKafkaRunner <runner.properties>}. The properties:
 * {@code engine.*} go to the engine without the prefix; {@code producer.*} to
 * the KafkaProducer; {@code key.converter}, {@code value.converter},
 * {@code header.converter} (class names) with their settings under the same
 * prefix. Runs until SIGTERM (the engine is closed, which stores the last
 * offsets) or SIGKILL (nothing more is stored). Prints
 * {@code debezium-kafka-runner: produced N} after each batch.
 */
public final class DebeziumKafkaRunner {

    private static Object instance(String className) throws Exception {
        return Class.forName(className).getDeclaredConstructor().newInstance();
    }

    private static String required(Map<String, String> conf, String key) {
        String v = conf.get(key);
        if (v == null) {
            throw new IllegalArgumentException("missing setting " + key);
        }
        return v;
    }

    private static Map<String, String> under(Map<String, String> conf, String prefix) {
        Map<String, String> sub = new HashMap<>();
        conf.forEach((k, v) -> {
            if (k.startsWith(prefix)) {
                sub.put(k.substring(prefix.length()), v);
            }
        });
        return sub;
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 1) {
            System.err.println("usage: DebeziumKafkaRunner <runner.properties>");
            System.exit(2);
        }
        Properties file = new Properties();
        try (InputStream in = Files.newInputStream(Path.of(args[0]))) {
            file.load(in);
        }
        Map<String, String> conf = new LinkedHashMap<>();
        file.stringPropertyNames().forEach(k -> conf.put(k, file.getProperty(k)));

        Converter key = (Converter) instance(required(conf, "key.converter"));
        key.configure(under(conf, "key.converter."), true);
        Converter value = (Converter) instance(required(conf, "value.converter"));
        value.configure(under(conf, "value.converter."), false);
        HeaderConverter header = (HeaderConverter) instance(required(conf, "header.converter"));
        Map<String, String> hconf = under(conf, "header.converter.");
        hconf.putIfAbsent("converter.type", "header");
        header.configure(hconf);

        Map<String, Object> pconf = new HashMap<>(under(conf, "producer."));
        pconf.putIfAbsent("acks", "all");
        pconf.putIfAbsent("enable.idempotence", "true");
        KafkaProducer<byte[], byte[]> producer =
                new KafkaProducer<>(pconf, new ByteArraySerializer(), new ByteArraySerializer());

        Properties engine = new Properties();
        engine.putAll(under(conf, "engine."));
        AtomicLong produced = new AtomicLong();
        Throwable[] failure = new Throwable[1];
        DebeziumEngine<RecordChangeEvent<SourceRecord>> dbz = DebeziumEngine
                .create(ChangeEventFormat.of(Connect.class))
                .using(engine)
                .notifying((List<RecordChangeEvent<SourceRecord>> batch,
                            DebeziumEngine.RecordCommitter<RecordChangeEvent<SourceRecord>> committer) -> {
                    List<Future<RecordMetadata>> sent = new ArrayList<>(batch.size());
                    for (RecordChangeEvent<SourceRecord> event : batch) {
                        SourceRecord r = event.record();
                        RecordHeaders headers = new RecordHeaders();
                        for (Header h : r.headers()) {
                            headers.add(h.key(),
                                    header.fromConnectHeader(r.topic(), h.key(), h.schema(), h.value()));
                        }
                        byte[] k = key.fromConnectData(r.topic(), headers, r.keySchema(), r.key());
                        byte[] v = value.fromConnectData(r.topic(), headers, r.valueSchema(), r.value());
                        sent.add(producer.send(new ProducerRecord<>(r.topic(), null, k, v, headers)));
                    }
                    // The acknowledgements are awaited even when the engine
                    // is stopping (it interrupts this thread), so that its
                    // final offset commit covers what Kafka has, as a
                    // Connect worker's final commit does.
                    boolean interrupted = false;
                    for (Future<RecordMetadata> f : sent) {
                        while (true) {
                            try {
                                f.get();
                                break;
                            }
                            catch (InterruptedException e) {
                                interrupted = true;
                            }
                            catch (Exception e) {
                                throw new IllegalStateException("kafka did not acknowledge a record", e);
                            }
                        }
                    }
                    for (RecordChangeEvent<SourceRecord> event : batch) {
                        committer.markProcessed(event);
                    }
                    committer.markBatchFinished();
                    System.out.println("debezium-kafka-runner: produced " + produced.addAndGet(batch.size()));
                    System.out.flush();
                    if (interrupted) {
                        throw new InterruptedException("stopping");
                    }
                })
                .using((boolean success, String message, Throwable error) -> {
                    if (!success) {
                        failure[0] = error != null ? error : new IllegalStateException(message);
                        System.err.println("debezium-kafka-runner: engine stopped: " + message);
                    }
                })
                .build();
        ExecutorService executor = Executors.newSingleThreadExecutor();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                dbz.close();
                executor.shutdown();
                executor.awaitTermination(30, TimeUnit.SECONDS);
                producer.close();
                System.out.println("debezium-kafka-runner: stopped after " + produced.get() + " records");
                System.out.flush();
            }
            catch (Exception e) {
                e.printStackTrace();
            }
        }));
        executor.execute(dbz);
        executor.shutdown(); // ends when the engine's run does
        System.err.println("debezium-kafka-runner: java " + System.getProperty("java.version") + ", engine started");
        executor.awaitTermination(Long.MAX_VALUE, TimeUnit.DAYS);
        if (failure[0] != null) {
            failure[0].printStackTrace();
            System.exit(1);
        }
    }
}
