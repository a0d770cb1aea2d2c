#include "tls_identity.h"

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(char *error, size_t error_size, const char *what) {
    unsigned long code = ERR_get_error();
    char reason[200] = "";
    if (code != 0) ERR_error_string_n(code, reason, sizeof reason);
    snprintf(error, error_size, "%s%s%s", what, code != 0 ? ": " : "", reason);
    ERR_clear_error();
    return -1;
}

// The PEM text a writer put into a memory BIO, as a NUL-terminated malloc'd string.
static char *bio_text(BIO *bio) {
    char *data = NULL;
    long length = BIO_get_mem_data(bio, &data);
    if (length <= 0) return NULL;
    char *text = malloc((size_t)length + 1);
    if (text == NULL) return NULL;
    memcpy(text, data, (size_t)length);
    text[length] = '\0';
    return text;
}

static int add_extension(X509 *certificate, X509V3_CTX *context, int nid, const char *value) {
    X509_EXTENSION *extension = X509V3_EXT_conf_nid(NULL, context, nid, value);
    if (extension == NULL) return 0;
    int added = X509_add_ext(certificate, extension, -1);
    X509_EXTENSION_free(extension);
    return added;
}

int dp_tls_self_signed(const char *host, int days, char **certificate_pem, char **key_pem,
                       char *error, size_t error_size) {
    int result = -1;
    EVP_PKEY *key = NULL;
    EVP_PKEY_CTX *generator = NULL;
    X509 *certificate = NULL;
    BIGNUM *serial = NULL;
    BIO *certificate_bio = NULL, *key_bio = NULL;
    char san[300];
    *certificate_pem = NULL;
    *key_pem = NULL;

    generator = EVP_PKEY_CTX_new_from_name(NULL, "EC", NULL);
    if (generator == NULL || EVP_PKEY_keygen_init(generator) <= 0 ||
        EVP_PKEY_CTX_set_group_name(generator, "P-256") <= 0 || EVP_PKEY_generate(generator, &key) <= 0) {
        fail(error, error_size, "cannot make an ECDSA P-256 key");
        goto done;
    }
    certificate = X509_new();
    serial = BN_new();
    if (certificate == NULL || serial == NULL || X509_set_version(certificate, 2) != 1 ||
        BN_rand(serial, 63, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) != 1 ||
        BN_to_ASN1_INTEGER(serial, X509_get_serialNumber(certificate)) == NULL ||
        X509_gmtime_adj(X509_getm_notBefore(certificate), -3600) == NULL ||
        X509_gmtime_adj(X509_getm_notAfter(certificate), (long)days * 86400) == NULL ||
        X509_set_pubkey(certificate, key) != 1) {
        fail(error, error_size, "cannot fill in the certificate");
        goto done;
    }
    X509_NAME *name = X509_get_subject_name(certificate);
    if (X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, (const unsigned char *)host, -1, -1, 0) != 1 ||
        X509_set_issuer_name(certificate, name) != 1) {
        fail(error, error_size, "cannot name the certificate");
        goto done;
    }
    X509V3_CTX context;
    X509V3_set_ctx(&context, certificate, certificate, NULL, NULL, 0);
    snprintf(san, sizeof san, "DNS:%s", host);
    if (!add_extension(certificate, &context, NID_basic_constraints, "critical,CA:FALSE") ||
        !add_extension(certificate, &context, NID_subject_alt_name, san) ||
        !add_extension(certificate, &context, NID_ext_key_usage, "serverAuth")) {
        fail(error, error_size, "cannot add the certificate's extensions");
        goto done;
    }
    if (X509_sign(certificate, key, EVP_sha256()) <= 0) {
        fail(error, error_size, "cannot sign the certificate");
        goto done;
    }
    certificate_bio = BIO_new(BIO_s_mem());
    key_bio = BIO_new(BIO_s_mem());
    if (certificate_bio == NULL || key_bio == NULL || PEM_write_bio_X509(certificate_bio, certificate) != 1 ||
        PEM_write_bio_PrivateKey(key_bio, key, NULL, NULL, 0, NULL, NULL) != 1) {
        fail(error, error_size, "cannot write the certificate and key as PEM");
        goto done;
    }
    *certificate_pem = bio_text(certificate_bio);
    *key_pem = bio_text(key_bio);
    if (*certificate_pem == NULL || *key_pem == NULL) {
        free(*certificate_pem);
        free(*key_pem);
        *certificate_pem = *key_pem = NULL;
        snprintf(error, error_size, "out of memory");
        goto done;
    }
    result = 0;
done:
    BIO_free(certificate_bio);
    BIO_free(key_bio);
    BN_free(serial);
    X509_free(certificate);
    EVP_PKEY_free(key);
    EVP_PKEY_CTX_free(generator);
    return result;
}

int dp_tls_sha256(const unsigned char *data, size_t length, unsigned char digest[32]) {
    unsigned int size = 0;
    return EVP_Digest(data, length, digest, &size, EVP_sha256(), NULL) == 1 && size == 32 ? 0 : -1;
}
