/* text_generation_cli.c: Megatron's tools/text_generation_cli.py, the small client of
 * run_text_generation_server: `text_generation_cli URL` asks for a prompt and a number of
 * tokens, sends PUT URL with {"prompts": [prompt], "tokens_to_generate": n} and prints
 * "Megatron Response: " and the text, until end of input. `text_generation_cli URL PROMPT
 * [TOKENS]` sends one request and prints the generated text. A refused request prints the
 * server's message and the status (exit 1 in the one-request form). HTTP is libcurl's.
 * URL may also be given as Megatron's client takes it, HOST:PORT (`text_generation_cli.py
 * localhost:5000`), which means http://HOST:PORT/api. */
#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct buffer { char *data; size_t size; } buffer;

static size_t collect(char *bytes, size_t size, size_t count, void *user) {
    buffer *b = user;
    size_t n = size * count;
    char *grown = realloc(b->data, b->size + n + 1);
    if (!grown) return 0;
    b->data = grown;
    memcpy(b->data + b->size, bytes, n);
    b->size += n;
    b->data[b->size] = 0;
    return n;
}

/* one request; prints the answer's text (or the refusal); returns 0 when answered */
static int ask(const char *url, const char *prompt, long tokens, int interactive) {
    json_t *request = json_pack("{s:[s],s:I}", "prompts", prompt, "tokens_to_generate", (json_int_t)tokens);
    if (!request) { fprintf(stderr, "text_generation_cli: the prompt is not UTF-8 text\n"); return 1; }
    char *body = json_dumps(request, JSON_COMPACT);
    json_decref(request);
    CURL *curl = curl_easy_init();
    buffer answer = {0};
    struct curl_slist *headers = curl_slist_append(NULL, "Content-Type: application/json");
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, "PUT");
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &answer);
    CURLcode rc = curl_easy_perform(curl);
    long status = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(headers);
    curl_easy_cleanup(curl);
    free(body);
    int failed = 1;
    if (rc != CURLE_OK) {
        fprintf(stderr, "text_generation_cli: PUT %s failed: %s\n", url, curl_easy_strerror(rc));
    } else {
        json_t *o = json_loads(answer.data ? answer.data : "", 0, NULL);
        json_t *text = o ? json_array_get(json_object_get(o, "text"), 0) : NULL;
        json_t *message = o ? json_object_get(o, "message") : NULL;
        if (status == 200 && json_is_string(text)) {
            printf(interactive ? "Megatron Response: %s\n" : "%s\n", json_string_value(text));
            failed = 0;
        } else {
            fprintf(stderr, "text_generation_cli: status %ld: %s\n", status,
                    json_is_string(message) ? json_string_value(message) : (answer.data ? answer.data : ""));
        }
        json_decref(o);
    }
    free(answer.data);
    return failed;
}

/* one line of standard input without its newline; NULL at end of input */
static char *read_line(const char *question) {
    static char line[65536];
    printf("%s", question);
    fflush(stdout);
    if (!fgets(line, sizeof line, stdin)) return NULL;
    line[strcspn(line, "\n")] = 0;
    return line;
}

int main(int argc, char **argv) {
    if (argc < 2 || argc > 4 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        fprintf(stderr, "usage: text_generation_cli URL|HOST:PORT [PROMPT [TOKENS_TO_GENERATE]]\n"
                        "  e.g. text_generation_cli http://127.0.0.1:5000/api, or as Megatron's client:\n"
                        "       text_generation_cli localhost:5000  (http://localhost:5000/api)\n");
        return argc < 2 || argc > 4 ? 2 : 0;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    /* Megatron's form, HOST:PORT: its client sends to 'http://' + url + '/api' */
    static char megatron_url[4096];
    if (!strstr(argv[1], "://")) {
        snprintf(megatron_url, sizeof megatron_url, "http://%s/api", argv[1]);
        argv[1] = megatron_url;
    }
    int status = 0;
    if (argc >= 3) {
        char *end = NULL;
        long tokens = argc == 4 ? strtol(argv[3], &end, 10) : 64;
        if (argc == 4 && (*end || tokens < 0)) {
            fprintf(stderr, "text_generation_cli: TOKENS_TO_GENERATE %s is not a number >= 0\n", argv[3]);
            return 2;
        }
        status = ask(argv[1], argv[2], tokens, 0);
    } else {
        for (;;) {
            char *prompt = read_line("Enter prompt: ");
            if (!prompt) break;
            char *copy = strdup(prompt);
            char *count = read_line("Enter number of tokens to generate: ");
            if (!count) { free(copy); break; }
            char *end = NULL;
            long tokens = strtol(count, &end, 10);
            if (!*count || *end || tokens < 0) printf("Enter a number of tokens >= 0\n");
            else ask(argv[1], copy, tokens, 1);
            free(copy);
        }
    }
    curl_global_cleanup();
    return status;
}
