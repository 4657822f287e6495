// hiredis, the system's (`libhiredis-dev`): its non-blocking context (`redisConnectNonBlock`, `redisBufferWrite`,
// `redisBufferRead`, `redisGetReplyFromReader`). Swift calls it directly; only the reply's release needs a type.
#include <hiredis/hiredis.h>

static inline void rk_redis_free_reply(redisReply *reply) { freeReplyObject(reply); }
