import CCurl

/// An HTTP response: its status and its body.
public struct CurlResponse: Sendable, Equatable {
    /// The status code (`200`).
    public let status: Int
    /// The body, as received.
    public let body: [UInt8]

    /// The body as UTF-8 text.
    public var text: String { String(decoding: body, as: UTF8.self) }
}

/// A transfer failed in libcurl: its code and libcurl's text for it. The description names no URL and no data.
public struct CurlError: Error, Sendable, CustomStringConvertible {
    /// libcurl's `CURLcode` (or, for an error of the multi interface, its `CURLMcode`).
    public let code: Int
    /// libcurl's text for the code.
    public let message: String

    init(_ code: CURLcode) {
        self.code = Int(code.rawValue)
        message = String(cString: curl_easy_strerror(code))
    }

    init(multi code: CURLMcode) {
        self.code = Int(code.rawValue)
        message = String(cString: curl_multi_strerror(code))
    }

    public var description: String { "CurlError(\(code): \(message))" }
}
