// libcurl's option setters are C variadic functions, which Swift cannot call: one typed wrapper per kind of value.
#define CURL_DISABLE_TYPECHECK 1
#include <curl/curl.h>

static inline CURLcode rk_curl_easy_set_string(CURL *easy, CURLoption option, const char *value) {
    return curl_easy_setopt(easy, option, value);
}
static inline CURLcode rk_curl_easy_set_long(CURL *easy, CURLoption option, long value) {
    return curl_easy_setopt(easy, option, value);
}
static inline CURLcode rk_curl_easy_set_pointer(CURL *easy, CURLoption option, void *value) {
    return curl_easy_setopt(easy, option, value);
}
static inline CURLcode rk_curl_easy_set_write(CURL *easy, curl_write_callback function) {
    return curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, function);
}
static inline CURLcode rk_curl_easy_set_open_socket(CURL *easy, curl_opensocket_callback function) {
    return curl_easy_setopt(easy, CURLOPT_OPENSOCKETFUNCTION, function);
}
static inline CURLcode rk_curl_easy_set_close_socket(CURL *easy, curl_closesocket_callback function) {
    return curl_easy_setopt(easy, CURLOPT_CLOSESOCKETFUNCTION, function);
}
static inline long rk_curl_easy_response_code(CURL *easy) {
    long code = 0;
    curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &code);
    return code;
}
static inline CURLMcode rk_curl_multi_set_socket(CURLM *multi, curl_socket_callback function, void *data) {
    CURLMcode result = curl_multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, function);
    return result != CURLM_OK ? result : curl_multi_setopt(multi, CURLMOPT_SOCKETDATA, data);
}
static inline CURLMcode rk_curl_multi_set_timer(CURLM *multi, curl_multi_timer_callback function, void *data) {
    CURLMcode result = curl_multi_setopt(multi, CURLMOPT_TIMERFUNCTION, function);
    return result != CURLM_OK ? result : curl_multi_setopt(multi, CURLMOPT_TIMERDATA, data);
}
